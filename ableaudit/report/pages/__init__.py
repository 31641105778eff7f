"""The report pages, one module per page; ``ableaudit.report.sections`` lists them in order."""
