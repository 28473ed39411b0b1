module github.com/groundskeeper-io/groundskeeper/internal/tools/modsize

go 1.26.0

require golang.org/x/mod v0.43.0
