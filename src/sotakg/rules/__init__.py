"""Stage 3, rules: the filing rules (SHACL shapes) checked over the graph.

Takes in a store and the records it was built from; compiles the shapes into SPARQL (or runs
pySHACL), maps each result back to a record's file and line and hands on findings and reports
(text, JSON, JUnit, SARIF, GitHub annotations).
"""
