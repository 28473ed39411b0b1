package lifecycle

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

func TestNamesAndShippedFormConvertLosslessly(t *testing.T) {
	cases := []struct {
		name Name
		kep  string
		want Policy
	}{
		{Retain, "Retain", Policy{ActionRetain, ActionRetain}},
		{DeleteOnOwnerDeletionOnly, "DeleteOnStatefulSetDeletionOnly", Policy{ActionDelete, ActionRetain}},
		{DeleteOnScaledownOnly, "DeleteOnScaledownOnly", Policy{ActionRetain, ActionDelete}},
		{DeleteOnScaledownAndOwnerDeletion, "DeleteOnScaledownAndStatefulSetDeletion", Policy{ActionDelete, ActionDelete}},
	}
	seen := map[Policy]bool{}
	for _, c := range cases {
		p, err := c.name.Policy()
		if err != nil || p != c.want {
			t.Errorf("%s.Policy() = %+v, %v; want %+v", c.name, p, err, c.want)
		}
		if seen[p] {
			t.Errorf("%s maps to %+v, which another name maps to too", c.name, p)
		}
		seen[p] = true
		back, err := p.Name()
		if err != nil || back != c.name {
			t.Errorf("%+v.Name() = %q, %v; want %q", p, back, err, c.name)
		}
		parsed, err := ParseName(c.kep)
		if err != nil || parsed != c.name {
			t.Errorf("ParseName(%q) = %q, %v; want %q", c.kep, parsed, err, c.name)
		}
		sts := p.StatefulSet()
		fromSts, err := FromStatefulSet(sts)
		if err != nil || fromSts != p {
			t.Errorf("FromStatefulSet(%+v) = %+v, %v; want %+v", sts, fromSts, err, p)
		}
	}
	if len(seen) != 4 {
		t.Errorf("four names map to %d policies", len(seen))
	}
}

func TestDefaultIsRetain(t *testing.T) {
	var zero Policy
	if n, err := zero.Name(); err != nil || n != Retain {
		t.Errorf("zero Policy is %q, %v; want Retain", n, err)
	}
	if p, err := FromStatefulSet(nil); err != nil || p != (Policy{ActionRetain, ActionRetain}) {
		t.Errorf("FromStatefulSet(nil) = %+v, %v; want Retain/Retain", p, err)
	}
	if p, err := Name("").Policy(); err != nil || p.DeletesOnOwnerDeletion() || p.DeletesOnScaledown() {
		t.Errorf(`Name("").Policy() = %+v, %v; want Retain`, p, err)
	}
	if p, err := FromStatefulSet(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenScaled: "Delete"}); err != nil || p != (Policy{ActionRetain, ActionDelete}) {
		t.Errorf("unset whenDeleted = %+v, %v; want Retain", p, err)
	}
}

func TestUnknownValuesAreRejectedNamingFieldAndValue(t *testing.T) {
	cases := []struct {
		desc      string
		err       error
		field     string
		value     string
		substring string
	}{
		{"unknown name", func() error { _, err := ParseName("DeleteAlways"); return err }(), "policy", "DeleteAlways", `policy = "DeleteAlways"`},
		{"lower case name", func() error { _, err := ParseName("retain"); return err }(), "policy", "retain", `policy = "retain"`},
		{"unknown whenDeleted", Policy{WhenDeleted: "Orphan"}.Validate(), "whenDeleted", "Orphan", `whenDeleted = "Orphan"`},
		{"unknown whenScaled", Policy{WhenScaled: "delete"}.Validate(), "whenScaled", "delete", `whenScaled = "delete"`},
		{"statefulset field", func() error {
			_, err := FromStatefulSet(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Delete", WhenScaled: "Sometimes"})
			return err
		}(), "whenScaled", "Sometimes", `whenScaled = "Sometimes"`},
		{"name of invalid policy", func() error { _, err := Policy{WhenDeleted: "x"}.Name(); return err }(), "whenDeleted", "x", `whenDeleted = "x"`},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			if !errors.Is(c.err, ErrInvalidPolicy) {
				t.Fatalf("error %v does not wrap ErrInvalidPolicy", c.err)
			}
			var pe *PolicyError
			if !errors.As(c.err, &pe) || pe.Field != c.field || pe.Value != c.value {
				t.Fatalf("error %v: want PolicyError{%s, %s}", c.err, c.field, c.value)
			}
			if !strings.Contains(c.err.Error(), c.substring) {
				t.Errorf("message %q does not contain %q", c.err.Error(), c.substring)
			}
		})
	}
}
