"""The engine host, the one object routes and sockets use: the engine's load, switch and unload, the live
settings, the open tabs, and the exclusive hold of races, sweeps and calibration."""
