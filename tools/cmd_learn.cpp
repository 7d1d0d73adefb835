// `abg train`, `abg eval`, `abg score`, `abg node` and `abg simulate` (which times the kernel) run in
// abg-learn, beside this binary: only they need LibTorch, whose ~290 shared libraries would otherwise slow every
// subcommand's start. `abg console` runs in abg-console, which needs CAF but
// not LibTorch. These entries forward the arguments unchanged (--help too).
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "tools/commands.h"

namespace abg::tools {

namespace {

void forward(const std::string& program, const std::string& name, const std::vector<std::string>& rest) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  auto learn = (ec ? std::filesystem::path(".") : self.parent_path()) / program;
  std::vector<std::string> args{learn.string(), name};
  args.insert(args.end(), rest.begin(), rest.end());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  fmt::print(stderr, "error: cannot run {}: {} (build it with `cmake --build build --target {}`)\n",
             learn.string(), std::strerror(errno), program);
  exit_code() = 1;
}

void add(CLI::App& app, const std::string& name, const std::string& description,
         const std::string& program = "abg-learn") {
  auto* cmd = app.add_subcommand(name, description);
  cmd->prefix_command();  // everything after the name is the program's to parse
  cmd->set_help_flag(); // so `abg NAME --help` reaches it
  cmd->callback([cmd, name, program] { forward(program, name, cmd->remaining()); });
}

} // namespace

void register_learn_commands(CLI::App& app) {
  add(app, "train", "Train embeddings as configured (PBG's torchbiggraph_train): epochs, edge paths, edge chunks, "
                    "buckets, through the actor graph; checkpoints after every iteration and resumes from the last "
                    "one. `abg train --help` for its options.");
  add(app, "eval", "Evaluate a checkpoint on an edge path: sampled ranking as PBG's torchbiggraph_eval, or filtered "
                   "ranking against every entity (--filtered). `abg eval --help` for its options.");
  add(app, "node", "Run one node of a cluster from a cluster file (its roles, its port), until training is done. "
                   "`abg node --help` for its options.");
  add(app, "console", "Attach to a running run (`abg train` or a cluster) and print a view of it: its nodes, "
                      "bucket grid, trainers or events, as text or JSON. `abg console --help` for its options.",
      "abg-console");
  add(app, "simulate", "Predict an epoch of the config's graph on clusters of several sizes in PBG's layout: a "
                       "discrete-event model driving the real bucket scheduler, with the kernel's measured speed and "
                       "modelled links (docs/scaling.md). `abg simulate --help` for its options.");
  add(app, "score", "Print the model's score of every edge of a file (lhs, relation, rhs names; columns as in `abg "
                    "import`). `abg score --help` for its options.");
}

} // namespace abg::tools
