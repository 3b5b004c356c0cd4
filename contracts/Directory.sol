// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title Stowage file directory
/// @notice Owners publish entries for content they store (keyed by owner and Mid, a CID string);
/// readers get access when the entry is public, when the owner grants it, or by buying it.
/// @dev Every change emits an event carrying the full new state of what changed, so an indexer
/// can rebuild the directory from logs alone.
contract Directory {
    uint256 public constant MAX_MID_BYTES = 128;
    uint256 public constant MAX_NAME_BYTES = 256;
    uint256 public constant MAX_KEYWORDS = 16;
    uint256 public constant MAX_KEYWORD_BYTES = 64;

    struct Entry {
        string name;
        uint64 size;
        /// @dev gwei, so a uint64 reaches far beyond any sensible price
        uint64 price;
        bool isPublic;
        string[] keywords;
    }

    /// @dev Kept apart from the entry and never deleted: bumping `generation` on unpublish
    /// orphans every grant and purchase of the old entry, so a re-publish starts clean without
    /// iterating over readers.
    struct Head {
        bool exists;
        uint64 generation;
    }

    mapping(address owner => mapping(string mid => Entry)) private entries;
    mapping(address owner => mapping(string mid => Head)) private heads;
    /// @dev Keyed by _accessKey(owner, mid, generation, reader).
    mapping(bytes32 key => bool) private granted;
    mapping(bytes32 key => bool) private bought;
    uint256 private locked = 1;

    event Published(
        address indexed owner, string mid, string name, uint64 size, uint64 price, bool isPublic, string[] keywords
    );
    event Updated(
        address indexed owner, string mid, string name, uint64 size, uint64 price, bool isPublic, string[] keywords
    );
    event Unpublished(address indexed owner, string mid);
    event ReadGranted(address indexed owner, string mid, address indexed reader);
    event ReadRevoked(address indexed owner, string mid, address indexed reader);
    event ReadBought(address indexed owner, string mid, address indexed reader, uint256 paid);

    error InvalidMid(uint256 length);
    error InvalidName(uint256 length);
    error TooManyKeywords(uint256 count);
    error InvalidKeyword(uint256 index, uint256 length);
    error EntryExists(address owner, string mid);
    error EntryNotFound(address owner, string mid);
    error ZeroAddress();
    error AlreadyGranted(address reader);
    error NotGranted(address reader);
    error AlreadyReadable(address reader);
    error InsufficientPayment(uint256 sent, uint256 price);
    error TransferFailed(address to, uint256 amount);
    error Reentrancy();

    modifier nonReentrant() {
        if (locked != 1) revert Reentrancy();
        locked = 2;
        _;
        locked = 1;
    }

    // ---- owner operations (msg.sender is the owner) ----

    function publish(
        string calldata mid,
        string calldata name,
        uint64 size,
        uint64 price,
        bool isPublic,
        string[] calldata keywords
    ) external {
        uint256 midLength = bytes(mid).length;
        if (midLength == 0 || midLength > MAX_MID_BYTES) revert InvalidMid(midLength);
        Head storage h = heads[msg.sender][mid];
        if (h.exists) revert EntryExists(msg.sender, mid);
        _check(name, keywords);
        h.exists = true;
        _store(entries[msg.sender][mid], name, size, price, isPublic, keywords);
        emit Published(msg.sender, mid, name, size, price, isPublic, keywords);
    }

    /// @notice Replaces every field; grants and purchases stay.
    function update(
        string calldata mid,
        string calldata name,
        uint64 size,
        uint64 price,
        bool isPublic,
        string[] calldata keywords
    ) external {
        _head(msg.sender, mid);
        _check(name, keywords);
        _store(entries[msg.sender][mid], name, size, price, isPublic, keywords);
        emit Updated(msg.sender, mid, name, size, price, isPublic, keywords);
    }

    function grantRead(string calldata mid, address reader) external {
        if (reader == address(0)) revert ZeroAddress();
        bytes32 key = _accessKey(msg.sender, mid, _head(msg.sender, mid).generation, reader);
        if (granted[key]) revert AlreadyGranted(reader);
        granted[key] = true;
        emit ReadGranted(msg.sender, mid, reader);
    }

    /// @notice Withdraws a grant. A purchase is not touched: the reader paid for it.
    function revokeRead(string calldata mid, address reader) external {
        bytes32 key = _accessKey(msg.sender, mid, _head(msg.sender, mid).generation, reader);
        if (!granted[key]) revert NotGranted(reader);
        granted[key] = false;
        emit ReadRevoked(msg.sender, mid, reader);
    }

    /// @notice Removes the entry with all its grants and purchases.
    function unpublish(string calldata mid) external {
        Head storage h = _head(msg.sender, mid);
        h.exists = false;
        h.generation += 1;
        delete entries[msg.sender][mid];
        emit Unpublished(msg.sender, mid);
    }

    // ---- reader operations ----

    /// @notice Buys read access at the entry's price (gwei); the owner gets exactly the price and
    /// any excess goes back to the sender.
    function buyRead(address owner, string calldata mid) external payable nonReentrant {
        Head storage h = _head(owner, mid);
        Entry storage e = entries[owner][mid];
        bytes32 key = _accessKey(owner, mid, h.generation, msg.sender);
        // Paying for what one can already read is always a mistake.
        if (e.isPublic || msg.sender == owner || granted[key] || bought[key]) revert AlreadyReadable(msg.sender);
        uint256 price = uint256(e.price) * 1 gwei;
        if (msg.value < price) revert InsufficientPayment(msg.value, price);
        bought[key] = true;
        emit ReadBought(owner, mid, msg.sender, price);
        _send(owner, price);
        _send(msg.sender, msg.value - price);
    }

    // ---- views ----

    function exists(address owner, string calldata mid) external view returns (bool) {
        return heads[owner][mid].exists;
    }

    function getEntry(address owner, string calldata mid) external view returns (Entry memory) {
        _head(owner, mid);
        return entries[owner][mid];
    }

    function canRead(address owner, string calldata mid, address reader) external view returns (bool) {
        Head storage h = heads[owner][mid];
        if (!h.exists) return false;
        if (reader == owner || entries[owner][mid].isPublic) return true;
        bytes32 key = _accessKey(owner, mid, h.generation, reader);
        return granted[key] || bought[key];
    }

    // ---- internals ----

    function _head(address owner, string calldata mid) private view returns (Head storage h) {
        h = heads[owner][mid];
        if (!h.exists) revert EntryNotFound(owner, mid);
    }

    function _check(string calldata name, string[] calldata keywords) private pure {
        uint256 nameLength = bytes(name).length;
        if (nameLength == 0 || nameLength > MAX_NAME_BYTES) revert InvalidName(nameLength);
        if (keywords.length > MAX_KEYWORDS) revert TooManyKeywords(keywords.length);
        for (uint256 i = 0; i < keywords.length; i++) {
            uint256 length = bytes(keywords[i]).length;
            if (length == 0 || length > MAX_KEYWORD_BYTES) revert InvalidKeyword(i, length);
        }
    }

    function _store(
        Entry storage e,
        string calldata name,
        uint64 size,
        uint64 price,
        bool isPublic,
        string[] calldata keywords
    ) private {
        e.name = name;
        e.size = size;
        e.price = price;
        e.isPublic = isPublic;
        // Element by element: the legacy code generator cannot copy string[] calldata to storage.
        delete e.keywords;
        for (uint256 i = 0; i < keywords.length; i++) {
            e.keywords.push(keywords[i]);
        }
    }

    function _accessKey(address owner, string calldata mid, uint64 generation, address reader)
        private
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(owner, mid, generation, reader));
    }

    function _send(address to, uint256 amount) private {
        if (amount == 0) return;
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
