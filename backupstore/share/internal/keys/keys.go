// Package keys names store keys in the errors of backupstore/share and
// its subpackages.
package keys

import (
	"fmt"
	"strings"
)

// maxNamed bounds the keys an error names.
const maxNamed = 10

// Named is the first maxNamed of keys, and how many more there are.
func Named(keys []string) string {
	if len(keys) <= maxNamed {
		return strings.Join(keys, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(keys[:maxNamed], ", "), len(keys)-maxNamed)
}
