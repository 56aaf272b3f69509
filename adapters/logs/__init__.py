"""What every engine's log reader shares: line prefixes learned per file, the shapes of
unknown lines, gzip read as far as it goes, a table of formats matched in one pass, and
the sources a user's disk holds (files, rotated sets, folders) as streams of lines."""
