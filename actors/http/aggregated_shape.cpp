#include "actors/http/upstream_shape.hpp"

namespace kvr::ingress {

void aggregated_shape::start() { host_.start_answering_leg(nullptr); }

}  // namespace kvr::ingress
