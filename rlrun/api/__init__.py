"""rlrun from Python: `recipes.load_recipe` (a file, a built-in's name or a mapping, with Python
objects where a recipe names a function) and `training.train` / `training.resume` (callbacks, a
`TrainResult`), whose checks and training `rlrun train` and `rlrun resume` call as well. The
package `rlrun` re-exports them with the names a program needs beside them (docs/python-api.md)."""
