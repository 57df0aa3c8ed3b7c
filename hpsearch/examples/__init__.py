"""Shipped example workloads: loops written as Ray Train's guides write them, searched unchanged.

- :mod:`~hpsearch.examples.digits`: a plain PyTorch loop, an MLP on scikit-learn's digits (the default search's).
- :mod:`~hpsearch.examples.digits_data`: the digits loop fed by Ray Data (``get_dataset_shard``), with its factories.
- :mod:`~hpsearch.examples.lightning_digits`: a PyTorch Lightning loop, as Ray Train's Lightning guide writes it.
- :mod:`~hpsearch.examples.transformers_tiny`: a Hugging Face ``Trainer`` loop, as Ray Train's guide writes it.
"""
