package cluster

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A term's epoch is its generation and its election key's etcd revision
// in one number: generation<<revisionBits | revision. Within one etcd
// history revisions only grow, so a later term has a larger epoch. etcd
// can lose its history (a lost disk, a container without a volume, `gaffer
// dev` on a kept database): its revisions then start over, below the epoch
// PostgreSQL's fence holds, and no term could raise the fence again. The
// generation counts etcd histories: a leader that finds no generation in
// etcd (or one older than the fence's) starts the next one, so its epoch
// is again above every earlier one.
const revisionBits = 40

// maxRevision is the largest etcd revision an epoch can carry (about 1.1
// trillion: at 10,000 writes a second, 3.5 years).
const maxRevision = 1<<revisionBits - 1

// epochOf combines a generation and an election revision.
func epochOf(generation, revision int64) (int64, error) {
	if revision > maxRevision || revision < 0 {
		return 0, fmt.Errorf("etcd revision %d does not fit an epoch (at most %d)", revision, int64(maxRevision))
	}
	return generation<<revisionBits | revision, nil
}

// generationOf is the generation part of an epoch.
func generationOf(epoch int64) int64 { return epoch >> revisionBits }

func (c *Cluster) generationKey() string { return c.cfg.Prefix + "/generation" }

// generation returns the generation of the etcd history this node sees,
// starting a new one when etcd holds none or one older than the fence's.
// Two winners racing (a deposed one and the new) agree: the first to
// write the key decides, the other reads it.
func (c *Cluster) generation(ctx context.Context) (int64, error) {
	fence, err := c.store.ReadFence(ctx)
	if err != nil {
		return 0, err
	}
	fenced := generationOf(fence.Epoch)
	key := c.generationKey()
	for range 3 {
		resp, err := c.etcd().Get(ctx, key)
		if err != nil {
			return 0, err
		}
		var (
			gen, modRev int64
			ok          bool
		)
		if len(resp.Kvs) == 1 {
			gen, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
			ok, modRev = err == nil, resp.Kvs[0].ModRevision
		}
		if ok && gen >= fenced && gen > 0 {
			return gen, nil
		}
		next := fenced + 1
		txn, err := c.etcd().Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, strconv.FormatInt(next, 10))).
			Commit()
		if err != nil {
			return 0, err
		}
		if txn.Succeeded {
			c.log.Warn("etcd holds no current generation (new, or its data was lost): starting a new one",
				"generation", next, "fence_epoch", fence.Epoch)
			return next, nil
		}
	}
	return 0, fmt.Errorf("the generation key %s keeps changing", key)
}
