module github.com/groundskeeper-io/groundskeeper/internal/tools/depsbudget

go 1.26.0
