//go:build race

package crt_test

func init() { raceFlag = []string{"-race"} }
