package proxy

import (
	"errors"
	"fmt"

	"github.com/ternmq/tern/localstore"
	"github.com/ternmq/tern/protocols"
)

// Sentinel errors of the node's own registries.
var (
	ErrTenantNotFound    = errors.New("proxy: tenant not found")
	ErrTenantExists      = errors.New("proxy: tenant already exists")
	ErrTenantNotEmpty    = errors.New("proxy: tenant still has namespaces")
	ErrNamespaceExists   = errors.New("proxy: namespace already exists")
	ErrNamespaceNotEmpty = errors.New("proxy: namespace still has topics")
)

// mapStoreErr turns storage errors into the protocols errors front ends
// understand, keeping the message.
func mapStoreErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, localstore.ErrTopicNotFound):
		return fmt.Errorf("%w: %v", protocols.ErrTopicNotFound, err)
	case errors.Is(err, localstore.ErrTopicExists):
		return fmt.Errorf("%w: %v", protocols.ErrTopicExists, err)
	case errors.Is(err, localstore.ErrPartitionNotFound):
		return fmt.Errorf("%w: %v", protocols.ErrPartitionNotFound, err)
	case errors.Is(err, localstore.ErrBadPartitions):
		return fmt.Errorf("%w: %v", protocols.ErrInvalidPartitions, err)
	case errors.Is(err, localstore.ErrClosed):
		return fmt.Errorf("%w: %v", protocols.ErrClosed, err)
	case errors.Is(err, localstore.ErrFailed):
		return fmt.Errorf("%w: %v", protocols.ErrStorage, err)
	}
	return err
}
