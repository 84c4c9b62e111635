"""fieldtrust: confidence calibration and audit for document extraction."""

__version__ = "0.1.0"
