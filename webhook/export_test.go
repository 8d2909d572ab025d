package webhook

import "github.com/gafferhq/gaffer/internal/clock"

// KeyCacheFor is how long the sender caches a tenant's keys.
const KeyCacheFor = keyCacheFor

// SetClock makes the key cache age on c, so that a test expires it by
// moving c rather than by waiting.
func (s *Secrets) SetClock(c clock.Clock) { s.clock = c }

// CheckHost is the http kind's check of a host's spelling.
var CheckHost = checkHost
