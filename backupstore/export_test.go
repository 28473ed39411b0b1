package backupstore

// ForceAzureBatch makes DeletePrefix use Blob Batch against Azurite too,
// so that the batch path is tested against a real server.
func ForceAzureBatch(on bool) { forceAzureBatch.Store(on) }
