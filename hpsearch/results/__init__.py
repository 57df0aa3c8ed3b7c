"""The results side: what is drawn, rendered and exported from an analysed search.

- :mod:`~hpsearch.results.plots`: matplotlib figures of :mod:`hpsearch.analysis`'s data (``hpsearch.plots``).
- :mod:`~hpsearch.results.report`: one HTML page, or Markdown with PNGs (``hpsearch report``).
- :mod:`~hpsearch.results.optuna_export`: the trials as an Optuna study (``hpsearch export``).
"""
