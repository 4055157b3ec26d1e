"""Shipping a trained model outside plait: the same model folder, packaged in the format another
tool loads and serves (an MLflow pyfunc model, ...), so that its predictions stay plait's own."""
