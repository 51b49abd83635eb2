package actors

func projectJournal(projectID string) string { return "project/" + projectID }

func walletJournal(accountID string) string { return "wallet/" + accountID }

func directoryJournal() string { return "directory" }
