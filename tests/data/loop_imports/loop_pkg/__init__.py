"""A package in the spec's folder, not installed: the loop is `loop_pkg.train:train_loop`."""
