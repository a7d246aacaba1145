"""Stage 4, views: what the graph looks like to people.

Takes in query results; hands on files: the graph as RDF, named CONSTRUCT views drawn as Mermaid,
DOT or SVG, the anthology's Markdown index pages and a static HTML site.
"""
