"""The `fieldtrust` command line: one thin command per library call."""
