"""Shipped example workloads."""
