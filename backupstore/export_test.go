package backupstore

// SetMaxFailedKeys lowers MaxFailedKeys for a test and returns the
// function that restores it.
func SetMaxFailedKeys(n int) (restore func()) {
	old := maxFailedKeys
	maxFailedKeys = n
	return func() { maxFailedKeys = old }
}
