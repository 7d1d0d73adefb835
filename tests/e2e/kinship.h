// The Kinship training config the end-to-end tests share (../shared/data/Kinship).
#pragma once

namespace abg::test {

inline constexpr const char* kinship_config = R"(entity_path = "data/kin"
edge_paths = ["data/kin/train", "data/kin/valid", "data/kin/test"]
checkpoint_path = "model/kin"
dimension = 64
dynamic_relations = true
global_emb = false
comparator = "dot"
loss_fn = "softmax"
lr = 0.1
regularization_coef = 1e-3
num_uniform_negs = 100
num_epochs = 8
eval_fraction = 0.0
workers = 2
seed = 7
[entities.all]
num_partitions = 1
[[relations]]
name = "all_edges"
lhs = "all"
rhs = "all"
operator = "complex_diagonal"
)";

} // namespace abg::test
