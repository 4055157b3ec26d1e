"""The features of the small config the tests in this folder build on."""

FEATURES = {
    "input_features": [{"name": "age", "type": "number"}, {"name": "city", "type": "category"}],
    "output_features": [{"name": "bought", "type": "binary"}],
}
