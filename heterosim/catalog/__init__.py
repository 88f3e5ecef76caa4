"""Catalogues of hardware (GPUs) and models (the zoo)."""
