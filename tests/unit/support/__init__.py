"""Pure helpers the unit tests share: histories of commands, an in-memory log."""
