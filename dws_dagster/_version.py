"""The package's version, in a module of its own: the OpenLineage events name it as their
producer, and reading it from here imports nothing else of the package (the package root's
lazy exports are for users, not for the package's own modules).
"""

__version__ = "0.1.0"
