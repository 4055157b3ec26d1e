"""The code of the MLflow pyfunc model that ``plait export_mlflow`` writes.

MLflow copies this file into the exported folder and runs it to load the model ("models from
code"), so nothing is unpickled: the plait installed where the model is loaded reads the plait
model folder MLflow keeps among the model's artifacts.
"""

import mlflow
import pandas as pd

from plait.export.mlflow import ARTIFACT, SavedModel


class PlaitPyfunc(mlflow.pyfunc.PythonModel):
    """``Model.predict`` as MLflow's ``predict``: the same columns, labels and probabilities."""

    def load_context(self, context):
        self.model = SavedModel(context.artifacts[ARTIFACT])

    # The pandas hint tells MLflow to infer no signature from it: export_mlflow gives one.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        return self.model.predict(model_input)


mlflow.models.set_model(PlaitPyfunc())
