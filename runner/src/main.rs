fn main() {
    std::process::exit(animaworks_tool::cli::main());
}
