"""The ``fairseq-local`` command and its subcommands, one module each."""
