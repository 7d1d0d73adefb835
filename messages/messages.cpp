#include <fmt/format.h>

#include "messages/interfaces.h"

namespace abg::msg {

std::string to_string(const partition_key& k) { return fmt::format("{}/{}", k.entity, k.part); }

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<bucket>("abg::bucket");
  cfg.add_message_type<part_key>("abg::part_key");
  cfg.add_message_type<part_version>("abg::part_version");
  cfg.add_message_type<grant>("abg::grant");
  cfg.add_message_type<bucket_stats>("abg::bucket_stats");
  cfg.add_message_type<partition_key>("abg::partition_key");
  cfg.add_message_type<partition_chunk>("abg::partition_chunk");
  cfg.add_message_type<partition_info>("abg::partition_info");
  cfg.add_message_type<named_tensor>("abg::named_tensor");
  cfg.add_message_type<table_file>("abg::table_file");
  cfg.add_message_type<table_save>("abg::table_save");
  cfg.add_message_type<table_restore>("abg::table_restore");
  cfg.add_message_type<trainer_status>("abg::trainer_status");
  cfg.add_message_type<node_status>("abg::node_status");
  cfg.add_message_type<std::vector<uint64_t>>("abg::actor_ids"); // with the node's status request
  cfg.add_message_type<log_line>("abg::log_line");
  cfg.add_message_type<param_status>("abg::param_status");
  cfg.add_message_type<run_summary>("abg::run_summary");
  cfg.add_message_type<data_listing>("abg::data_listing");
  cfg.add_message_type<tensor>("abg::tensor");
  cfg.add_message_type<trainer_setup>("abg::trainer_setup");
  cfg.add_message_type<member>("abg::member");
  cfg.add_message_type<events_actor>("abg::events_actor");
  cfg.add_message_type<lock_server_actor>("abg::lock_server_actor");
  cfg.add_message_type<trainer_actor>("abg::trainer_actor");
  cfg.add_message_type<node_actor>("abg::node_actor");
  cfg.add_message_type<coordinator_actor>("abg::coordinator_actor");
  cfg.add_message_type<inspector_actor>("abg::inspector_actor");
  cfg.add_message_type<data_server_actor>("abg::data_server_actor");
}

}  // namespace abg::msg
