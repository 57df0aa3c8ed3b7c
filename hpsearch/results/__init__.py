"""The results side: what is drawn, rendered and exported from an analysed search.

- :mod:`~hpsearch.results.plots`: matplotlib figures of :mod:`hpsearch.analysis`'s data (``hpsearch.plots``).
- :mod:`~hpsearch.results.report`: one HTML page, or Markdown with PNGs (``hpsearch report``): ``write_report``.
- :mod:`~hpsearch.results.report_content`: what the report shows, whatever its format: facts, tables, errors, logs.
- :mod:`~hpsearch.results.report_figures`: the report's plots as PNG bytes, each with its caption.
- :mod:`~hpsearch.results.report_html`: the report as one self-contained HTML page.
- :mod:`~hpsearch.results.report_markdown`: the report as Markdown, every string from the folder escaped.
- :mod:`~hpsearch.results.optuna_export`: the trials as an Optuna study (``hpsearch export``).
- :mod:`~hpsearch.results.checkpoints`: ``load_model``, a trial's best checkpoint back in its model (torch when called).
"""
