// Private: scaletrain-data subcommands that live in files of their own. argv[0] is the
// subcommand word (e.g. "imagenet" for `scaletrain-data convert imagenet ...`).
#pragma once

namespace scaletrain::cli {

// `scaletrain-data convert imagenet --source DIR --output DIR --encoding raw|jpeg ...`
int convert_imagenet_main(int argc, char** argv);

}  // namespace scaletrain::cli
