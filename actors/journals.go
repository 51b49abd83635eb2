package actors

func projectJournal(projectID string) string { return "project/" + projectID }

func directoryJournal() string { return "directory" }
