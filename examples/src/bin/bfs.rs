fn main() -> std::process::ExitCode {
    use examples::bfs as b;
    examples::main_with("bfs", b::FLAGS, b::USAGE, b::run)
}
