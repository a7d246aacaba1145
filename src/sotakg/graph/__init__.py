"""Stage 2, graph: records become RDF in the embedded Oxigraph store.

Takes in the records stage's ``Anthology``; hands on an Oxigraph store (one generation directory
behind a link, swapped in atomically by a build). ``open_graph`` is the one place that decides
whether the store is stale and rebuilds it.
"""
