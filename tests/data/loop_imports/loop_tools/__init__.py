"""A package below the loop's folder."""
