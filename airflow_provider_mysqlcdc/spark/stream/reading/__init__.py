"""The executor side: a binlog range read into the source's columnar layout, and typed change rows."""
