"""Dynamic providers, one package per resource kind."""

from clients.threadsafe_ast import install

install()  # the provider server imports our modules on its worker threads (clients/threadsafe_ast.py)
