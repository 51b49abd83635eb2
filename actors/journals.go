package actors

func directoryJournal() string { return "directory" }
