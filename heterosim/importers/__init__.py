"""Other tools' workloads and plans as HeteroSim experiments (``heterosim import``).

- :mod:`heterosim.importers.experiment_file`: the importer's driver, the experiment YAML it
  writes, with comments saying what came from the file and what was assumed;
- :mod:`heterosim.importers.sailor_amp`: Sailor plan JSONs and AMP partitions;
- :mod:`heterosim.importers.metis_flashflex`: Metis result lines and FlashFlex hetero configs;
- :mod:`heterosim.importers.aicb`: SimAI/AICB workload files (read by
  :mod:`heterosim.workload.aicb`).
"""
