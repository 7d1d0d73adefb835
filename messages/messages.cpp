#include "messages/messages.h"

namespace abg::msg {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<bucket>("abg::bucket");
  cfg.add_message_type<acquire_result>("abg::acquire_result");
  cfg.add_message_type<bucket_stats>("abg::bucket_stats");
  cfg.add_message_type<epoch_stats>("abg::epoch_stats");
  cfg.add_message_type<partition_key>("abg::partition_key");
  cfg.add_message_type<partition_chunk>("abg::partition_chunk");
  cfg.add_message_type<trainer_status>("abg::trainer_status");
  cfg.add_message_type<tensor>("abg::tensor");
}

}  // namespace abg::msg
