package conformance

import (
	"reflect"
	"testing"

	"github.com/golocker/locker/backend"
)

// TestInterfacesOfSetsEveryField: interfacesOf reports each optional
// interface that a driver and its lease implement, and none that they do
// not. TestInterfacesListsEveryOptionalInterface keeps the fields in step
// with package backend.
func TestInterfacesOfSetsEveryField(t *testing.T) {
	type allDriver struct {
		backend.Driver
		backend.Waiter
		backend.Watcher
		backend.Inspector
		backend.QueueInspector
		backend.BatchRenewer
		backend.LogSetter
		backend.Dequeuer
	}
	type allLease struct {
		backend.Lease
		backend.Passer
		backend.Downgrader
		backend.Proclaimer
	}
	type bareDriver struct{ backend.Driver }
	type bareLease struct{ backend.Lease }

	all := reflect.ValueOf(interfacesOf(allDriver{}, allLease{}, allLease{}))
	none := reflect.ValueOf(interfacesOf(bareDriver{}, bareLease{}, bareLease{}))
	for i := range all.NumField() {
		name := all.Type().Field(i).Name
		if !all.Field(i).Bool() {
			t.Errorf("Interfaces.%s is false for a driver and lease that implement every optional interface", name)
		}
		if none.Field(i).Bool() {
			t.Errorf("Interfaces.%s is true for a driver and lease that implement none", name)
		}
	}
}
