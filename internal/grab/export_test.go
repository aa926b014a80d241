package grab

import "time"

// SetCreateMarkTTL shortens how long a keyed create's mark lives between
// renewals, for tests of creates that outlast it.
func SetCreateMarkTTL(s *Service, ttl time.Duration) { s.safety.createMarkTTL = ttl }
