"""`rlrun sweep`: experiments, not runs. A sweep file names a base recipe, the points to try and
the seeds (`spec`); every run is validated and located before anything starts (`plan`), then
trained on this machine (`local`) or on a SLURM cluster through submitit (`slurm`). Running a
sweep again resumes its unfinished runs and skips its finished ones.
"""
