"""The release, in a module of its own: code inside the package reads it without importing the
package root (which imports the steps)."""

__version__ = "0.1.0"
