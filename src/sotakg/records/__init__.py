"""Stage 1, records: the files of a data folder, read strictly into records.

Takes in a data folder (YAML files, one record each) or a published Markdown index page; hands on
``Anthology`` objects (records with the file and line of every field) to the graph stage, and writes
records back as YAML (the importer). Knows nothing of RDF.
"""
