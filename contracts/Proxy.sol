// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title Stowage quota and payment contract
/// @notice Users keep a deposit here; the gateway's operator key spends it on space or traffic
/// packages. Every payment goes to the owner (the treasury), never to the operator, so a leaked
/// operator key can at worst buy quota for users, not take their money.
/// @dev No immutables on purpose: the runtime code then equals the compiled deployed bytecode,
/// which lets a gateway check a saved address with eth_getCode.
contract Proxy {
    uint8 public constant SPACE = 0;
    uint8 public constant TRAFFIC = 1;

    /// @dev Packed into two slots. `periodStart` tells the gateway from which block time its
    /// off-chain traffic count belongs to the current period.
    struct Record {
        uint64 nonce;
        uint64 purchased;
        uint64 free;
        uint64 expire;
        uint64 periodStart;
    }

    address public owner;
    /// @dev May be the zero address: that switches purchases off (e.g. after a key leak) until
    /// the owner sets a new operator.
    address public operator;
    /// @notice Wei per byte.
    uint64 public spacePrice = 1 gwei;
    /// @notice Wei per byte.
    uint64 public trafficPrice = 0.1 gwei;
    /// @notice Seconds a purchase keeps the period alive.
    uint64 public validity = 3 * 365 days;

    mapping(address user => uint256) private deposits;
    mapping(address user => mapping(uint8 kind => Record)) private records;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event OperatorChanged(address indexed previousOperator, address indexed newOperator);
    event PricesChanged(uint64 spacePrice, uint64 trafficPrice);
    event ValidityChanged(uint64 validity);
    event Deposited(address indexed user, uint256 amount, uint256 newBalance);
    event Withdrawn(address indexed user, uint256 amount, uint256 newBalance);
    /// @param nonce the record's nonce after this purchase
    event Purchased(
        address indexed user, uint8 indexed kind, uint64 bytes_, uint256 cost, uint64 nonce, uint64 expire
    );
    /// @param nonce the record's nonce after this grant
    event FreeGranted(address indexed user, uint8 indexed kind, uint64 bytes_, uint64 nonce, uint64 expire);

    error NotOwner(address caller);
    error NotOperator(address caller);
    error ZeroAddress();
    error ZeroAmount();
    error ZeroBytes();
    error InvalidKind(uint8 kind);
    error InvalidValidity();
    error NonceMismatch(uint64 expected, uint64 actual);
    error InsufficientDeposit(uint256 have, uint256 need);
    error QuotaOverflow();
    error ExpireOverflow();
    error TransferFailed(address to, uint256 amount);

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    modifier onlyOperator() {
        if (msg.sender != operator) revert NotOperator(msg.sender);
        _;
    }

    constructor(address operator_) {
        owner = msg.sender;
        operator = operator_;
        emit OwnershipTransferred(address(0), msg.sender);
        emit OperatorChanged(address(0), operator_);
    }

    // ---- administration ----

    function transferOwnership(address newOwner) external onlyOwner {
        // A zero owner would lock the treasury and every setting for good.
        if (newOwner == address(0)) revert ZeroAddress();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    function setOperator(address newOperator) external onlyOwner {
        emit OperatorChanged(operator, newOperator);
        operator = newOperator;
    }

    function setPrices(uint64 space, uint64 traffic) external onlyOwner {
        spacePrice = space;
        trafficPrice = traffic;
        emit PricesChanged(space, traffic);
    }

    function setValidity(uint64 seconds_) external onlyOwner {
        // Zero would make every purchase expire in the block that bought it.
        if (seconds_ == 0) revert InvalidValidity();
        validity = seconds_;
        emit ValidityChanged(seconds_);
    }

    // ---- deposits ----

    function deposit() external payable {
        _deposit(msg.sender);
    }

    function depositFor(address user) external payable {
        if (user == address(0)) revert ZeroAddress();
        _deposit(user);
    }

    /// @dev Plain transfers count as a deposit, so currency sent by mistake is not stranded.
    receive() external payable {
        _deposit(msg.sender);
    }

    function withdraw(uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        uint256 have = deposits[msg.sender];
        if (have < amount) revert InsufficientDeposit(have, amount);
        uint256 left = have - amount;
        deposits[msg.sender] = left;
        emit Withdrawn(msg.sender, amount, left);
        _pay(msg.sender, amount);
    }

    // ---- quota ----

    /// @notice Spend `user`'s deposit on `bytes_` bytes of space. `expectedNonce` is the nonce the
    /// operator read; a mismatch means someone else changed the record in between, and buying
    /// twice must not happen silently.
    function buySpace(address user, uint64 bytes_, uint64 expectedNonce) external onlyOperator {
        _buy(user, SPACE, bytes_, expectedNonce, spacePrice);
    }

    function buyTraffic(address user, uint64 bytes_, uint64 expectedNonce) external onlyOperator {
        _buy(user, TRAFFIC, bytes_, expectedNonce, trafficPrice);
    }

    /// @param validitySeconds how long the grant keeps the period alive; 0 means `validity`
    function grantFree(address user, uint8 kind, uint64 bytes_, uint64 validitySeconds) external onlyOwner {
        if (user == address(0)) revert ZeroAddress();
        if (kind != SPACE && kind != TRAFFIC) revert InvalidKind(kind);
        if (bytes_ == 0) revert ZeroBytes();
        Record storage r = records[user][kind];
        _add(r, bytes_, validitySeconds == 0 ? validity : validitySeconds, true);
        emit FreeGranted(user, kind, bytes_, r.nonce, r.expire);
    }

    // ---- views ----

    function depositOf(address user) external view returns (uint256) {
        return deposits[user];
    }

    function spaceRecord(address user)
        external
        view
        returns (uint64 nonce, uint256 deposit_, uint64 purchased, uint64 free, uint64 expire, uint64 periodStart)
    {
        return _view(user, SPACE);
    }

    function trafficRecord(address user)
        external
        view
        returns (uint64 nonce, uint256 deposit_, uint64 purchased, uint64 free, uint64 expire, uint64 periodStart)
    {
        return _view(user, TRAFFIC);
    }

    // ---- internals ----

    function _deposit(address user) private {
        if (msg.value == 0) revert ZeroAmount();
        uint256 balance = deposits[user] + msg.value;
        deposits[user] = balance;
        emit Deposited(user, msg.value, balance);
    }

    function _buy(address user, uint8 kind, uint64 bytes_, uint64 expectedNonce, uint64 price) private {
        if (user == address(0)) revert ZeroAddress();
        if (bytes_ == 0) revert ZeroBytes();
        Record storage r = records[user][kind];
        if (r.nonce != expectedNonce) revert NonceMismatch(expectedNonce, r.nonce);
        uint256 cost = uint256(bytes_) * price;
        uint256 have = deposits[user];
        if (have < cost) revert InsufficientDeposit(have, cost);
        deposits[user] = have - cost;
        _add(r, bytes_, validity, false);
        emit Purchased(user, kind, bytes_, cost, r.nonce, r.expire);
        _pay(owner, cost);
    }

    /// @dev The period rule: once expired, old bytes stop counting and a new period begins now;
    /// the expiry only ever moves forward.
    function _add(Record storage r, uint64 bytes_, uint64 validFor, bool isFree) private {
        if (block.timestamp >= r.expire) {
            r.purchased = 0;
            r.free = 0;
            r.periodStart = uint64(block.timestamp);
        }
        if (isFree) {
            r.free = _sum(r.free, bytes_);
        } else {
            r.purchased = _sum(r.purchased, bytes_);
        }
        uint256 until = block.timestamp + validFor;
        if (until > type(uint64).max) revert ExpireOverflow();
        if (until > r.expire) r.expire = uint64(until);
        r.nonce += 1;
    }

    function _sum(uint64 a, uint64 b) private pure returns (uint64) {
        uint256 s = uint256(a) + b;
        if (s > type(uint64).max) revert QuotaOverflow();
        return uint64(s);
    }

    function _pay(address to, uint256 amount) private {
        if (amount == 0) return;
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }

    function _view(address user, uint8 kind)
        private
        view
        returns (uint64, uint256, uint64, uint64, uint64, uint64)
    {
        Record storage r = records[user][kind];
        return (r.nonce, deposits[user], r.purchased, r.free, r.expire, r.periodStart);
    }
}
